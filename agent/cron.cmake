# SPDX-License-Identifier: Apache-2.0
# The cron calculator: parsing and next-fire times, pure (no clock, no I/O). Time zones come from the system
# tz database through Howard Hinnant's date library (date::date-tz, built with USE_OS_TZDB=1).
add_library(baton_agent_cron STATIC ${CMAKE_CURRENT_SOURCE_DIR}/src/cron.cpp)
target_include_directories(baton_agent_cron PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(baton_agent_cron PUBLIC date::date-tz PRIVATE baton::common)
