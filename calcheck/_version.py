__version__ = "0.5.3"
SCHEMA_VERSION = "1"
