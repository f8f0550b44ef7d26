__version__ = "0.5.5"
SCHEMA_VERSION = "1"
