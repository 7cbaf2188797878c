// The source the libraries' shared precompiled header (pch.h) is built with; it defines nothing.
