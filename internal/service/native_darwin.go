package main

// nativeService: a launchd user agent.
var nativeService = launchdService
