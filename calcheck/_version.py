__version__ = "0.14.0"
SCHEMA_VERSION = "1"
