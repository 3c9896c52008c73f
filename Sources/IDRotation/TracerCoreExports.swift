// UserID, DailyKey, UTCDay, the clocks and Hex moved to TracerCore; every module that imports
// IDRotation still sees them, so the move changed no importer.
@_exported import TracerCore
