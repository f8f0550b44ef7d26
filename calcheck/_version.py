__version__ = "0.5.0"
SCHEMA_VERSION = "1"
