__version__ = "0.6.1"
SCHEMA_VERSION = "1"
