// The source the shared test precompiled header (test_pch.h) is built with; it defines nothing.
