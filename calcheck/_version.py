__version__ = "0.5.4"
SCHEMA_VERSION = "1"
