__version__ = "0.9.0"
SCHEMA_VERSION = "1"
