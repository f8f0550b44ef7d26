__version__ = "0.6.0"
SCHEMA_VERSION = "1"
