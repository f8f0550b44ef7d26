__version__ = "0.15.0"
SCHEMA_VERSION = "1"
