/* in progress */ typedef int clank_placeholder_t;
