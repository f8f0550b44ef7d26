__version__ = "0.5.2"
SCHEMA_VERSION = "1"
