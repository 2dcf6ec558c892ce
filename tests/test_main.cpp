// The one translation unit that instantiates Boost.Test's runner for every test executable.
#define BOOST_TEST_MODULE echo
#ifdef ECHO_BOOST_TEST_HEADER_ONLY
#include <boost/test/included/unit_test.hpp>
#else
#include <boost/test/unit_test.hpp>
#endif
