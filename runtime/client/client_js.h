/* The browser client (SPEC §11): morphdom and runtime/client/client.js as one script,
 * generated at build time by cmake/ClankClient.cmake into generated/client_js.c. */
#ifndef CLANK_CLIENT_JS_H
#define CLANK_CLIENT_JS_H

/* The served bytes, followed by a 0 that is not part of them. */
extern const char clank_client_js[];
extern const unsigned long clank_client_js_len;
/* The first 16 hex digits of their SHA-256: the script's URL is /__clank/client.<hash>.js. */
extern const char clank_client_js_hash[];

#endif
