__version__ = "0.4.0"
SCHEMA_VERSION = "1"
