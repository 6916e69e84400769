// Package caps lets root tests run code as an unprivileged user would,
// without leaving the test process (Linux: capabilities are per thread).
package caps
