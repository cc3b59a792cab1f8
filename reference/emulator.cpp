#include "reference/emulator.hpp"
