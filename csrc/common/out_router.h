// Ops whose spec returns their optional `out` argument. A custom op that returns an alias of an
// input breaks torch.compile (an error under CI=1 in torch 2.11, always from 2.12), and an alias
// annotation on the return cannot be functionalized. So the public op is a
// CompositeImplicitAutograd router over two alias-free internal ops:
//   _<op>_new(args)        -> Tensor   (allocates its result)
//   _<op>_into(args, out)  -> ()       (writes `out`)
// Eager callers still get `out` back; traced graphs only ever see the internal ops.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>

namespace mslk {

template <class Sig>
c10::TypedOperatorHandle<Sig> internal_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

}  // namespace mslk
