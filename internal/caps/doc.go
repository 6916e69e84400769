// Package caps holds kwire's Linux capabilities: Keep drops those a
// running capture no longer needs, for good and in every thread; and
// WithoutNetRaw lets root tests run code as an unprivileged user would,
// without leaving the test process (capabilities are per thread).
package caps
