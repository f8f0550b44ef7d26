__version__ = "0.11.0"
SCHEMA_VERSION = "1"
