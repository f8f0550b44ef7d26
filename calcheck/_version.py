__version__ = "0.8.0"
SCHEMA_VERSION = "1"
