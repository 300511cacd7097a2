// Callers of the client also need the wire types; one import gives both.
@_exported import AppStoreModels
