__version__ = "0.16.0"
SCHEMA_VERSION = "1"
