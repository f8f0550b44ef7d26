__version__ = "0.17.0"
SCHEMA_VERSION = "1"
