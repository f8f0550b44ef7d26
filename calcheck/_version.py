__version__ = "0.7.1"
SCHEMA_VERSION = "1"
