// The one translation unit that compiles Boost.Asio's and Boost.Beast's implementation
// (BOOST_ASIO_SEPARATE_COMPILATION, BOOST_BEAST_SEPARATE_COMPILATION, set on imhash_runtime for
// every target that links it): the other translation units see declarations only, which saves
// each of them parsing and instantiating the implementation again.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
