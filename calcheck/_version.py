__version__ = "0.10.0"
SCHEMA_VERSION = "1"
