#include "reference/exact.hpp"
