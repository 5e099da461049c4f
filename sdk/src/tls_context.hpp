// SPDX-License-Identifier: Apache-2.0
#pragma once
// The client side of TLS now lives in common/ (baton/common/tls_context.hpp). Kept only for etcd_backend.cpp,
// which includes it by this name and is being changed on another branch; remove once that has landed and
// etcd_backend.cpp includes "baton/common/tls_context.hpp".
#include "baton/common/tls_context.hpp"
