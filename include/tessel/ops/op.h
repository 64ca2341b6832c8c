/* Op declarations: what an op is called, its signature and its scalar parameters, declared once in the
 * SDK and included by the host and by every plugin, so no schema is ever written twice.
 *
 * Each header of this folder lists its ops in an X-macro, TESSEL_<FAMILY>_OPS(X), with one
 *   X(ident, "op.name", "schema", params_size, "optional outputs")
 * per op, and declares one `static const tessel_op_decl tessel_op_<ident>` for each. The schema grammar
 * is in <tessel/plugin.h>; `T` is the floating dtype of the call (the dtype of the op's first T
 * argument: its first input for most ops) and `A` its accumulation type. A plugin registers a kernel for an op with
 * that declaration's name, schema and params_size; the host refuses one that differs.
 *
 * Parameter structs begin with struct_size (set it to sizeof the struct) and, like every struct of the
 * ABI, only ever grow at the end; a kernel checks params_size before it reads them.
 */
#ifndef TESSEL_OPS_OP_H_
#define TESSEL_OPS_OP_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessel_op_decl {
  const char* name;
  const char* schema;
  size_t params_size;           /* sizeof the op's parameter struct; 0 when it has none */
  const char* optional_outputs; /* comma-separated outputs that a caller may pass with 0 rows to skip */
} tessel_op_decl;

#if defined(__GNUC__)
#define TESSEL_OP_UNUSED __attribute__((unused))
#else
#define TESSEL_OP_UNUSED
#endif

#define TESSEL_DECLARE_OP(ident, name, schema, params_size, optional) \
  static const tessel_op_decl tessel_op_##ident TESSEL_OP_UNUSED = {name, schema, params_size, optional};

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_OPS_OP_H_ */
