// SPDX-License-Identifier: Apache-2.0
// The one translation unit that compiles Asio and Beast (separate compilation keeps builds fast).
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
