// Empty: everything lives in tests/.
