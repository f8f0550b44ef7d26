__version__ = "0.5.14"
SCHEMA_VERSION = "1"
