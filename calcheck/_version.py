__version__ = "0.5.6"
SCHEMA_VERSION = "1"
