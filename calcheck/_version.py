__version__ = "0.12.0"
SCHEMA_VERSION = "1"
