// libchorus.so's one source of its own: the version the package was built as (everything else
// comes whole from chorus_bindings, bindings/package/CMakeLists.txt).
extern "C" const char* chorus_package_version() { return CHORUS_PACKAGE_VERSION; }
