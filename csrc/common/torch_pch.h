// Precompiled header for the torch glue TUs (never included by kernel .cu files).
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <torch/library.h>
