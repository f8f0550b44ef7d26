__version__ = "0.5.17"
SCHEMA_VERSION = "1"
