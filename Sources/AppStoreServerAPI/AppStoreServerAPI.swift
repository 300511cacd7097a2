@_exported import AppStoreModels
