// SPDX-License-Identifier: Apache-2.0
// Boost.JSON compiled into the request target itself (header-only mode), so its parser is instrumented for
// coverage along with protocol.cpp.
#include <boost/json/src.hpp>
