package model

// Windows hosts (cmd_shell_ext bat or ps1) name their paths by drive:
// C:\gse\plugins\bin or C:/gse/plugins/bin. Such a path is accepted for a
// bat or ps1 process only (a sh process's paths are POSIX); it obeys the
// one path rule (checkPath: no control characters, no ".." segment, at
// most MaxPath bytes) plus Windows' reserved characters. A Linux agent
// answers such a process "not supported on this OS"
// (Control.UnsupportedShell).

// WindowsShell reports whether ext names a Windows script type.
func WindowsShell(ext string) bool { return ext == "bat" || ext == "ps1" }

// IsWindowsPath reports whether p starts with a drive: a letter, a colon
// and a slash or backslash.
func IsWindowsPath(p string) bool {
	return len(p) >= 3 && (p[0]|0x20 >= 'a' && p[0]|0x20 <= 'z') && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

// checkHostPath checks a definition's path for a process of cmd_shell_ext
// ext: Windows drive paths are accepted for bat and ps1.
func (v *Validator) checkHostPath(field, p string, required bool, ext string) {
	v.checkPath(field, p, required, WindowsShell(ext))
}
