#ifndef CHURNWATCH_CLIBPQ_SHIM_H
#define CHURNWATCH_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
