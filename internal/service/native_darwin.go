package service

// nativeService: a launchd user agent.
var nativeService = launchdService
