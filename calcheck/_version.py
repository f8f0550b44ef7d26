__version__ = "0.13.0"
SCHEMA_VERSION = "1"
