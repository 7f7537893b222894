package config

// Native is this platform's layout.
var Native = MacOS
