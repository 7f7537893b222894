package main

// nativeService: systemd user units.
var nativeService = systemdService
