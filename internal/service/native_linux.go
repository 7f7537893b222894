package service

// nativeService: systemd user units.
var nativeService = systemdService
