// A shared object that is not a Tessel plugin: it exports a function, but not tessel_plugin_init.
extern "C" __attribute__((visibility("default"))) int not_a_tessel_plugin() { return 42; }
