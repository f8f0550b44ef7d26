__version__ = "0.7.0"
SCHEMA_VERSION = "1"
